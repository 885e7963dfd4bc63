"""How numbers read as text and as notebook HTML, one set of formats for every front end.
"""
