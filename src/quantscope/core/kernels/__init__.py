"""The compiled loops (Numba, free of the GIL) and the worker threads that run them on every
core: quantize and dequantize passes, sorted-row statistics, block sums, the radix sort, the
fused one-read scan, and the line that tells a person when they compile.
"""
