"""Integer schemes: scale and zero point from a range (:class:`QuantParams`), and the
quantize / dequantize rule itself.
"""
