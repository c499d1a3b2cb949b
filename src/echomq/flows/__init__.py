"""Flows (issue 27): a parent job that waits in ``waiting_children`` until its
children are done, children in any queue.

- :mod:`.relay`: a child's ending in one queue applied to its parent in another.
"""
