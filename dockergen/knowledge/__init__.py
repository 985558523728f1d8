"""Facts with sources: the components' facts files (with a profile's overlay), kernels, layer
compression, what makes builds reproducible.
"""
