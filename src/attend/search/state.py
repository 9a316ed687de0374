"""Generic state reordering for search: no branch on the attention or decoder type."""

from __future__ import annotations

from torch import Tensor


def reorder_state(state, index: Tensor):
    """Select batch rows ``index`` in every tensor of a (nested) dict/list/tuple of batch-first tensors."""
    if isinstance(state, Tensor):
        return state.index_select(0, index)
    if isinstance(state, dict):
        return {key: reorder_state(value, index) for key, value in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(reorder_state(value, index) for value in state)
    return state
