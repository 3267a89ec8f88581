"""What every method's retriever shares: the retriever base (`base.py`), the device-resident index
(`device.py`) and the result records (`results.py`); each method's scoring is in its package under
`gpu_tigrag/methods/`."""
