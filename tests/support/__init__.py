"""Test helpers shared by several test modules (not tests themselves).

Importable as `support.*` because pytest's default (prepend) import mode puts tests/ on sys.path when
it loads tests/conftest.py, which it does before any test below tests/.
"""
