"""Choosing parameters: range methods (percentile, MSE, entropy), runtime presets with each
runtime's own formulas, and the entry points that choose for integers and formats.
"""
