"""Checks that pass or fail (exit status 1 when they fail): the GPU check, the reliability probes,
the identity of rankings and arrays across a change, the encoder conversion and the run/eval agreement
(`python -m bench list --kind check`)."""
