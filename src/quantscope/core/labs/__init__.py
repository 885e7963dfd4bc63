"""The explanatory labs built on the engine: int8 matmul and requantization, outlier fixes,
the worked mapping example, bit-width curves, the views' data and the panes' captions.
"""
