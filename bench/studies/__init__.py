"""Frozen decision studies and the faithfulness comparisons with the methods' public code: each was run
to choose a default or settle a question, and its result page under bench/results/ is the record of why
(`python -m bench list --kind study`). They stay runnable to revisit a decision; nothing reruns them
routinely."""
