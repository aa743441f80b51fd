"""Shared answers (``Api.route(shared_answers=True)``): a cached model is serialized once for all
the requests it answers, and its JSON goes when the model goes."""

from __future__ import annotations

import gc

from pydantic import BaseModel

from protocol.http import endpoints
from protocol.http.endpoints import render


class Item(BaseModel):
    name: str
    sizes: list[int]


def _body(model: BaseModel, *, shared: bool) -> bytes:
    response = render(model, 200, shared=shared)
    assert response.status == 200 and response.content_type == "application/json"
    body = response.body
    assert isinstance(body, bytes)
    return body


def test_a_shared_answer_is_the_models_json_each_time() -> None:
    item = Item(name="North", sizes=[1, 2])
    first = _body(item, shared=True)
    assert first == item.model_dump_json().encode() == _body(item, shared=False)
    assert _body(item, shared=True) is first  # rendered once, answered again


def test_a_new_model_is_rendered_anew_even_where_an_old_one_lived() -> None:
    bodies = set()
    for i in range(200):  # ids of dropped models get reused: never their JSON
        item = Item(name=f"farm {i}", sizes=[i])
        body = _body(item, shared=True)
        assert body == item.model_dump_json().encode()
        bodies.add(body)
        del item
    assert len(bodies) == 200


def test_the_json_of_a_dropped_model_is_dropped_too() -> None:
    gc.collect()
    before = len(endpoints._RENDERED)
    items = [Item(name=f"farm {i}", sizes=list(range(100))) for i in range(100)]
    for item in items:
        _body(item, shared=True)
    assert len(endpoints._RENDERED) == before + 100
    del items, item
    gc.collect()
    assert len(endpoints._RENDERED) == before
