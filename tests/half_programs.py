"""What a half-precision program states about its rounding, read from the HLO XLA compiles it to (the
structural check of issue 41, the same on every host).

XLA's CPU backend hands HLO float16 arithmetic to LLVM as half operations, whose code depends on the
CPU: without native float16 each is computed in float and rounded back, with AVX512-FP16 it is float16
arithmetic and LLVM fuses a product into the sum that uses it (one rounding where CPU rounds twice).
LLVM also narrows a float32 operation on widened halves whose result is narrowed again into a half
operation, so a written round trip `v.astype(float16).astype(float32)` between two operations makes
half arithmetic out of float32 code. And XLA's one-step float64 -> float16 convert rounds twice on
most CPUs (through float, as c10::Half does) and once with native float16. A program whose half
results are CPU's on every CPU therefore has, once XLA has optimized it:

- no arithmetic in a half dtype (moves, selects, compares, converts and sign operations only);
- no round trip from a wider float through a half and back: rounding is reduce_precision (integer
  operations on the bits; jaxdev.ops.cpu_numerics.round_to);
- no float64 -> half convert in one step (through float32, as C++ builds a half from a double).
"""

from __future__ import annotations

import re

import jax

HALVES = frozenset({"f16", "bf16"})
_WIDER = frozenset({"f32", "f64"})
_FLOATS = HALVES | _WIDER
# Operations that move, select, compare, convert or change a sign: exact in any dtype on any CPU. A
# reduce, map or scatter is judged by its computation's own instructions.
_EXACT = frozenset({
    "parameter", "constant", "convert", "bitcast", "bitcast-convert", "reshape", "broadcast", "transpose",
    "slice", "dynamic-slice", "dynamic-update-slice", "concatenate", "pad", "reverse", "copy", "select",
    "compare", "tuple", "get-tuple-element", "gather", "scatter", "fusion", "call", "while", "conditional",
    "iota", "sort", "opt-barrier", "copy-start", "copy-done", "is-finite", "abs", "negate", "maximum",
    "minimum", "clamp", "reduce-precision", "after-all", "custom-call",
})  # fmt: skip
_NAME = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*")


def _element_type(text: str) -> tuple[str, str]:
    """(the element type of the shape `text` starts with, or 'tuple'; the rest of the text)."""
    if text.startswith("("):
        depth = 0
        for i, ch in enumerate(text):
            depth += (ch == "(") - (ch == ")")
            if depth == 0:
                return "tuple", text[i + 1 :].lstrip()
    shape, _, rest = text.partition(" ")
    return re.match(r"[a-z]+[0-9a-z]*", shape).group(0), rest


def _opcode_and_operands(text: str) -> tuple[str | None, list[str]]:
    match = re.match(r"([\w\-]+)\(", text)
    if match is None:
        return None, []
    depth, start = 0, match.end() - 1
    for i in range(start, len(text)):
        depth += (text[i] == "(") - (text[i] == ")")
        if depth == 0:
            return match.group(1), re.findall(r"%([\w.\-]+)", text[start:i])
    return match.group(1), []


def computations(hlo: str) -> list[dict[str, tuple[str, str, list[str], str]]]:
    """Each computation of an HLO module's text: instruction name -> (element type, opcode, operand
    names, the line)."""
    found: list[dict] = []
    for line in hlo.splitlines():
        if line.rstrip().endswith("{") and "=" not in line.split("(")[0]:
            found.append({})
            continue
        match = _NAME.match(line)
        if match is None or not found:
            continue
        etype, rest = _element_type(line[match.end() :])
        opcode, operands = _opcode_and_operands(rest)
        if opcode is not None:
            found[-1][match.group(1)] = (etype, opcode, operands, line.strip())
    return found


# Of the exact operations, those whose float result is one of their float operands' values
_MOVES = _EXACT - {"parameter", "constant", "convert", "bitcast-convert", "iota", "fusion", "call", "custom-call"}


def _computed(name: str, instructions: dict, seen: set) -> bool:
    """Whether `name`'s value comes, through moves only, from arithmetic of its own computation (what
    LLVM can narrow to half arithmetic when a convert to a half takes it)."""
    if name in seen or name not in instructions:
        return False
    seen.add(name)
    etype, opcode, operands, _ = instructions[name]
    if etype not in _FLOATS:
        return False  # an index or a predicate: integer arithmetic is no float rounding
    if opcode not in _EXACT:
        return True
    return opcode in _MOVES and any(_computed(o, instructions, seen) for o in operands)


def hazards(hlo: str) -> list[str]:
    """The instructions of `hlo` (an optimized HLO module's text) whose result may depend on the CPU
    it runs on, each as 'why: the instruction'. A round trip of a value that was only moved (XLA's own
    conversions around a bfloat16 select, say) rounds nothing and is not one."""
    found = []
    for instructions in computations(hlo):
        for etype, opcode, operands, line in instructions.values():
            types = [instructions[o][0] for o in operands if o in instructions]
            if opcode not in _EXACT and (etype in HALVES or HALVES.intersection(types)):
                found.append(f"arithmetic in a half dtype: {line}")
            if opcode != "convert" or not types:
                continue
            if etype in HALVES and types[0] == "f64":
                found.append(f"float64 to a half in one step: {line}")
            source = instructions.get(operands[0])
            if etype in _WIDER and source and source[1] == "convert" and source[0] in HALVES and source[2]:
                inner = instructions.get(source[2][0])
                if inner and inner[0] in _WIDER and _computed(source[2][0], instructions, set()):
                    found.append(f"round trip through a half: {line}")
    return found


def program_hazards(fn, *args) -> list[str]:
    """hazards() of the program `fn` (jitted or not) compiles to for `args`."""
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    return hazards(jitted.lower(*args).compile().as_text())
