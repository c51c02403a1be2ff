"""The public site: the boards as static files built from the warehouse, and their publication to a URL.

Design notes: docs/MODULE_NOTES.md, `deepscholar.site`.
"""
