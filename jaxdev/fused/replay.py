"""Replaying what was learned: an op met again where the trie expects it costs a guard, not a key.

Recording an op (recorder.record) builds its whole key (every argument's type and value, every tensor's
storage slot and layout), hashes it and looks it up among the children of the segment's place in the
trie; then it builds the op's references (which input, which earlier result) for the program. Most of
recording's Python time is that, and an optimizer's foreach op has hundreds of tensors.

Yet where an op lands in the trie fixes all of it: a segment's state after a path of the trie is the
same whatever segment took it (inputs numbered by first appearance, results by the op that made them,
lifted numbers in order), so the op's references and the placeholders it adds are the child's own.
So each place keeps, per op (by its id), the child last taken from it (`Trie.expect`), and a call
first asks whether its key would be that child's key: the native `fused_match` (jaxdev/csrc/fused.cpp)
walks the arguments against the child's key part by part, builds nothing and hashes nothing, and on a
match does to the segment what recording does (new input slots, lifted numbers, placeholders). The
recorder then makes the results as learned and appends the child's node. Anything that differs, or is
unusual (a conj/neg bit, a copy-on-write storage, an inference tensor, a view whose offset moved),
takes the full key, which decides exactly as before; without the native module every call does.

The guard reads the child's key once compiled (`fused_guard`, jaxdev/csrc/fused_guard.cpp: its tensors'
layouts as C++ integers), not from its tuples at every call: the same answers, with no Python int
unboxed per size and stride (an optimizer step guards ~1,000 tensors). `compiled = False` walks the
tuples instead (benchmarks/fused_host.py's `--compare guard`).

The segment's placeholder index (`Segment.placeholders`, which only building a key reads) is not kept
up on a replayed op: the next full key rebuilds it from the inputs (`Segment.refresh`).
"""

from __future__ import annotations

from jaxdev import native
from jaxdev.fused import boxes

_match = getattr(native.module, "fused_match", None)
_guard = getattr(native.module, "fused_guard", None)
compiled = True  # the compiled key's walk (see above); False: the key's tuples


class Expected:
    """What replaying an op at a trie child needs: its `key` (the guard; `guard` the same compiled),
    its node in the segment's list (op, refs, krefs, learned, kernel), the positions of its lifted
    floats (registry's DYNAMIC_NUMBERS) and the tensors that become new placeholders, as (position, meta)."""

    __slots__ = ("guard", "key", "lift", "new_inputs", "node")

    def __init__(self, key: tuple, node: tuple, lift, new_inputs: tuple):
        self.key, self.node, self.lift, self.new_inputs = key, node, lift, new_inputs
        self.guard = _guard(key) if _guard is not None else None


def expect(parent, child, seg, key: tuple, node: tuple, lift, first_input: int, tensors: list) -> None:
    """After the full key took `child` from `parent` (with no tensor keyed by a moved offset: whether one
    moves is decided on a miss), the next call of the op there is guarded against it."""
    if _match is None:
        return
    if child.expected is None:
        new_inputs = []
        for t, (_, meta) in zip(seg.inputs[first_input:], seg.input_metas[first_input:]):
            position = next((i for i, u in enumerate(tensors) if u is t), None)
            if position is None:  # a placeholder that is not one of the op's tensors: keyed otherwise
                return
            new_inputs.append((position, meta))
        child.expected = Expected(key, node, tuple(lift) if lift else None, tuple(new_inputs))
    # Keyed by the op's id: hashing an OpOverload calls its Python __hash__ (0.1 us, every recorded op).
    # The child's node holds that op, so no other object can have its id while the entry is there.
    if child.expected.node[0] is node[0]:
        parent.expect[id(node[0])] = child


def match(seg, child, args: tuple, kwargs: dict):
    """The op's tensor arguments if this call's key is `child`'s (the segment then holds what recording
    it adds, but for its results and node), else None."""
    e = child.expected
    if e is None or _match is None:  # expected by an earlier call that could not be guarded; no module
        return None
    return _match(seg, e.key, args, kwargs, e.lift, e.new_inputs, boxes.WrittenBox, e.guard if compiled else None)
