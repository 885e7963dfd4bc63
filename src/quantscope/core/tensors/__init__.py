"""What a tensor is to the engine: input checks, framework tensors as NumPy arrays, the
units a layout splits it into (tensor, channel, group), histogram bins and synthetic tensors.
"""
