"""Report generators ("systems") and what runs and stores them.

Every module of this package is a candidate: the kind registry (base.system_kinds) imports them all
once and registers each System subclass that declares a kind; there is no list of kinds to keep.
"""
