"""A provider's answer decoded with the spans of its members: the same value as json.loads, and
each member's span holds exactly that member's text (the mirror stores a page's list from it)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloud.pos_provider.json_spans import decode_object

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(
    st.dictionaries(st.text(), _VALUES, max_size=5),
    st.sampled_from([None, 0, 2]),
    st.booleans(),
    st.sampled_from([(", ", ": "), (",", ":"), (" ,\n", " :\t")]),
)
def test_an_object_decodes_as_json_loads_and_each_span_is_its_member(
    document: dict[str, Any], indent: int | None, ascii_only: bool, separators: tuple[str, str]
) -> None:
    text = " \n" + json.dumps(
        document, indent=indent, ensure_ascii=ascii_only, separators=separators
    )
    value, spans = decode_object(text)
    assert value == json.loads(text)
    assert set(spans) == set(document)
    for key, (start, end) in spans.items():
        assert json.loads(text[start:end]) == document[key]
        if indent is None:
            member = json.dumps(document[key], ensure_ascii=ascii_only, separators=separators)
            assert text[start:end] == member


def test_a_member_given_twice_keeps_the_last_as_json_loads_does() -> None:
    text = '{"orders": [1], "cursor": "c", "orders": [{"id": "x"}]}'
    value, spans = decode_object(text)
    assert value == json.loads(text)
    start, end = spans["orders"]
    assert text[start:end] == '[{"id": "x"}]'


def test_not_an_object_is_decoded_without_spans() -> None:
    assert decode_object(" [1, 2] ") == ([1, 2], {})
    assert decode_object('"text"') == ("text", {})


@pytest.mark.parametrize(
    "text",
    ["", "{", '{"a":}', '{"a": 1,}', '{"a": 1} x', "{a: 1}", '{"a" 1}', '{"a": 1 "b": 2}', "{}}"],
)
def test_text_that_is_not_json_is_refused_as_json_loads_refuses_it(text: str) -> None:
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        decode_object(text)
