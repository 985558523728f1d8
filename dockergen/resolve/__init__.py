"""The Part contract, the fold that orders parts by what they read, the Context parts are given,
the typed Resolved model and the content tag.
"""
