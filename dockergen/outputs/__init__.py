"""Everything written from one Resolution: the Dockerfile and build context, bake files and locks
(fleet), deploy, observe, plan, the Python lock, schema and reference.
"""
