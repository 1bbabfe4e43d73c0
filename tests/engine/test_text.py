import pytest

from langchain_context_guard import compress_lines, truncate_text

MAX, HEAD, TAIL = 50_000, 2_000, 2_000


def test_short_text_is_unchanged():
    assert truncate_text("short", MAX, HEAD, TAIL) == "short"


def test_exactly_max_chars_is_unchanged():
    text = "x" * MAX
    assert truncate_text(text, MAX, HEAD, TAIL) is text


def test_max_chars_plus_one_is_cut_to_head_marker_tail():
    text = "h" * HEAD + "m" * (MAX + 1 - HEAD - TAIL) + "t" * TAIL
    out = truncate_text(text, MAX, HEAD, TAIL)
    assert out.startswith("h" * HEAD + "\n\n... [")
    assert out.endswith("] ...\n\n" + "t" * TAIL)
    assert "m" not in out
    assert (
        f"[{MAX + 1 - HEAD - TAIL:,} characters truncated; original {MAX + 1:,}" in out
    )


def test_marker_states_omitted_and_original_length():
    out = truncate_text("a" * 10_000, 1_000, 100, 100)
    assert "9,800 characters truncated; original 10,000 characters" in out


@pytest.mark.parametrize(
    ("max_chars", "head", "tail"),
    [(100, 40, 40), (120, 0, 60), (300, 149, 150), (1_000, 10, 10)],
    ids=["tight", "tail-only", "nearly-all", "roomy"],
)
def test_result_never_exceeds_max_and_cutting_again_changes_nothing(
    max_chars, head, tail
):
    out = truncate_text("z" * 5_000, max_chars, head, tail)
    assert len(out) <= max_chars
    assert truncate_text(out, max_chars, head, tail) == out


def test_tail_zero_keeps_only_head():
    out = truncate_text("ab" * 1_000, 500, 100, 0)
    assert out.startswith("ab" * 50)
    assert out.endswith("...\n\n")


@pytest.mark.parametrize(
    ("max_chars", "head", "tail"),
    [(0, 0, 0), (100, -1, 10), (100, 60, 40)],
    ids=["zero-max", "negative-head", "head+tail>=max"],
)
def test_bad_arguments_say_what_is_wrong(max_chars, head, tail):
    with pytest.raises(ValueError, match="max_chars"):
        truncate_text("text", max_chars, head, tail)


def test_odd_unicode_is_cut_by_code_point():
    text = "👍🏽é\u0301" * 1_000 + "\ud800"
    out = truncate_text(text, 200, 50, 50)
    assert len(out) <= 200
    assert out.endswith("\ud800")


def test_compress_lines_keeps_head_and_tail_lines():
    text = "\n".join(f"line {i}" for i in range(100))
    out = compress_lines(text, 3, 2)
    assert out.splitlines()[:3] == ["line 0", "line 1", "line 2"]
    assert out.splitlines()[-2:] == ["line 98", "line 99"]
    assert "95 lines omitted, original" in out
    assert f"{len(text):,} characters" in out


def test_compress_lines_cuts_one_huge_line():
    out = compress_lines("y" * 10_000, 3, 2, max_line_chars=100)
    assert len(out) < 400
    assert "9,900 chars" in out


@pytest.mark.parametrize("max_chars", [150, 400, 5_000])
def test_a_named_source_stays_within_max_chars(max_chars):
    text = "z" * 20_000
    out = truncate_text(text, max_chars, 40, 40, source="call_0123456789abcdef")
    assert len(out) <= max_chars
    assert 'full text: read_tool_result("call_0123456789abcdef")' in out
    assert "read_tool_result" not in truncate_text(text, max_chars, 40, 40)


def test_compress_lines_names_the_source():
    text = "\n".join(f"line {i}" for i in range(100))
    out = compress_lines(text, 3, 2, source="call_7")
    assert 'full text: read_tool_result("call_7")' in out
    assert "read_tool_result" not in compress_lines(text, 3, 2)


@pytest.mark.parametrize("source", [None, "c1"])
def test_a_cut_text_is_cut_again_around_its_marker_never_through_it(source):
    text = "".join(f"line {i}\n" for i in range(2_000))
    once = truncate_text(text, 1_000, 400, 400, source)
    again = truncate_text(once, 300, 100, 100)
    assert len(again) <= 300
    assert again.startswith("line 0\nline 1\n")
    assert again.endswith("line 1999\n")
    assert f"original {len(text):,} characters" in again
    assert again.count("characters truncated") == 1
    assert (source is not None) == ('read_tool_result("c1")' in again)
    head, rest = again.split("\n\n... [", 1)
    tail = rest.split("] ...\n\n", 1)[1]
    omitted = int(rest.split(" ")[0].replace(",", ""))
    assert omitted == len(text) - len(head) - len(tail)
