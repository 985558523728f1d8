"""What a user hands over, read and checked: profile YAML with positions, extends and overrides,
the profile model, files, base-image pins, the Python lock format.
"""
