"""Number formats beyond integers: element types (FP8/6/4, E8M0...) with their casts and
grids, the catalogue of block formats by name, and their compiled quantize loops.
"""
