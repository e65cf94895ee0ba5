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

- no arithmetic in a half dtype but moves, selects, compares, converts, sign operations and lone
  correctly rounded operations (a sum, difference, product, quotient or square root: every CPU rounds
  those once, natively or in float, and the same); no half product summed;
- no round trip of a computed value from a wider float through float16 and back: rounding is
  reduce_precision (integer operations on the bits; jaxdev.ops.kit.cpu_numerics.round_to). bfloat16 has
  no such hazard: XLA converts to it with integer code of its own, never an LLVM bfloat16 rounding to
  narrow (tests/ops/test_cpu_numerics.py checks both on this host's IR), and its FloatNormalization
  wraps every bfloat16 operation in such conversions;
- no float64 -> half convert in one step (through float32, as C++ builds a half from a double).

A test of an XLA fact (how XLA converts or rounds here) states what the fact needs with xla_fact, from
native_float16() and xla_flag(), and skips with the reason where it does not hold.
"""

from __future__ import annotations

import os
import re

import jax
import pytest

HALVES = frozenset({"f16", "bf16"})
_WIDER = frozenset({"f32", "f64"})
_FLOATS = HALVES | _WIDER
# Operations that move, select, compare, convert or change a sign: exact in any dtype on any CPU. An
# operation that applies a computation (reduce, scatter, sort, map) is judged by that computation's
# own instructions, which hazards() reads as it reads the others.
_EXACT = frozenset({
    "parameter", "constant", "convert", "bitcast", "bitcast-convert", "reshape", "broadcast", "transpose",
    "slice", "dynamic-slice", "dynamic-update-slice", "concatenate", "pad", "reverse", "copy", "select",
    "compare", "tuple", "get-tuple-element", "gather", "scatter", "fusion", "call", "while", "conditional",
    "iota", "sort", "opt-barrier", "copy-start", "copy-done", "is-finite", "abs", "negate", "maximum",
    "minimum", "clamp", "reduce-precision", "after-all", "custom-call", "reduce", "reduce-window", "map",
    "select-and-scatter",
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
_APPLIES = frozenset({"reduce", "reduce-window", "map", "select-and-scatter", "scatter", "sort"})
_MOVES = (
    _EXACT - _APPLIES - {"parameter", "constant", "convert", "bitcast-convert", "iota", "fusion", "call", "custom-call"}
)


def _computed(name: str, instructions: dict, seen: set) -> bool:
    """Whether `name`'s value comes, through moves only, from arithmetic of its own computation (what
    LLVM can narrow to half arithmetic when a convert to a half takes it)."""
    if name in seen or name not in instructions:
        return False
    seen.add(name)
    etype, opcode, operands, _ = instructions[name]
    if etype not in _FLOATS:
        return False  # an index or a predicate: integer arithmetic is no float rounding
    if opcode not in _EXACT or opcode in _APPLIES:
        return True
    return opcode in _MOVES and any(_computed(o, instructions, seen) for o in operands)


# IEEE operations every CPU rounds correctly in float16, natively or in float (whose 24 bits round a
# half's sum, product, quotient or root exactly once): alone they give one answer everywhere
_CORRECTLY_ROUNDED = frozenset({"add", "subtract", "multiply", "divide", "sqrt"})


def _product(name: str, instructions: dict, seen: set) -> bool:
    """Whether `name`'s value is, through moves only, a half product of its own computation (which a
    CPU with native float16 fuses into the sum that takes it)."""
    if name in seen or name not in instructions:
        return False
    seen.add(name)
    etype, opcode, operands, _ = instructions[name]
    if opcode == "multiply":
        return etype in HALVES
    return opcode in _MOVES and any(_product(o, instructions, seen) for o in operands)


def hazards(hlo: str) -> list[str]:
    """The instructions of `hlo` (an optimized HLO module's text) whose result may depend on the CPU
    it runs on, each as 'why: the instruction'. A round trip of a value that was only moved rounds
    nothing and is not one."""
    found = []
    for instructions in computations(hlo):
        for etype, opcode, operands, line in instructions.values():
            types = [instructions[o][0] for o in operands if o in instructions]
            if opcode not in _EXACT and (etype in HALVES or HALVES.intersection(types)):
                if opcode not in _CORRECTLY_ROUNDED:
                    found.append(f"arithmetic in a half dtype: {line}")
                elif opcode in ("add", "subtract") and any(_product(o, instructions, set()) for o in operands):
                    found.append(f"a half product summed: {line}")
            if opcode != "convert" or not types:
                continue
            if etype in HALVES and types[0] == "f64":
                found.append(f"float64 to a half in one step: {line}")
            source = instructions.get(operands[0])
            if etype in _WIDER and source and source[1] == "convert" and source[0] == "f16" and source[2]:
                inner = instructions.get(source[2][0])
                if inner and inner[0] in _WIDER and _computed(source[2][0], instructions, set()):
                    found.append(f"round trip through a half: {line}")
    return found


def program_hazards(fn, *args) -> list[str]:
    """hazards() of the program `fn` (jitted or not) compiles to for `args`."""
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    return hazards(jitted.lower(*args).compile().as_text())


# --- the host: what an XLA fact a test relies on depends on -------------------------------------------

# XLA's x86 levels (xla/backends/cpu/codegen/cpu_features.cc) at or below which AVX512-FP16 is off
_NO_AVX512 = ("SSE4_2", "AVX", "AVX2")


def xla_flag(name: str) -> str | None:
    """The value XLA_FLAGS gives --`name` (the last one given wins, as in XLA), or None."""
    value = None
    for flag in os.environ.get("XLA_FLAGS", "").split():
        key, _, given = flag.lstrip("-").partition("=")
        if key == name:
            value = given or "true"
    return value


def native_float16() -> bool | None:
    """Whether XLA generates float16 instructions here: the CPU has AVX512-FP16 (Linux's flag
    avx512_fp16) and no --xla_cpu_max_isa of AVX2 or below turns it off. None where /proc/cpuinfo
    cannot say."""
    try:
        with open("/proc/cpuinfo") as info:
            flags = next((line.split(":", 1)[1].split() for line in info if line.startswith("flags")), None)
    except OSError:
        return None
    if flags is None:
        return None
    return "avx512_fp16" in flags and (xla_flag("xla_cpu_max_isa") or "").upper() not in _NO_AVX512


def xla_fact(holds: bool, reason: str) -> None:
    """Skip the calling test where the XLA fact it checks next does not hold on this host or under these
    XLA_FLAGS (`reason` says what the fact needs and that it is missing): it states why jaxdev writes its
    arithmetic as it does, and is no result of jaxdev's (issue 41)."""
    if not holds:
        pytest.skip(f"an XLA fact that does not hold here: {reason}")
