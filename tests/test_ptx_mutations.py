"""Random edits of the synthetic enc2 either fail to parse with a ParseError or go through parse,
emit, linearise and `rr spec`'s description without any other exception (issue 14 item 7). The
harness is tests/mutations.py, whose full run (`python tests/mutations.py`, 2000 mutants) is a
benchmark; this is its first 200, fixed seed."""

from __future__ import annotations

from mutations import mutant, run, synth_enc2


def test_two_hundred_mutants_of_enc2_raise_nothing_but_parse_errors():
    text = synth_enc2()
    out = run(text, 200, seed=14)
    assert out.outcomes["parse error"] and out.outcomes["described"]  # both kinds of mutant occur
    assert out.crash_count == 0, "\n".join(
        f"{stage} {name}: mutant {i} ({how}): {message} at {where}"
        for (stage, name), examples in out.crashes.items() for i, how, message, where in examples[:3])


def test_a_mutant_is_reproducible_from_its_seed_and_index():
    text = synth_enc2()
    assert mutant(text, 14, 7) == mutant(text, 14, 7) and mutant(text, 14, 7)[0] != text
