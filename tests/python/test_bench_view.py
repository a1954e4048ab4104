"""bench/view.py's report: the linearity target reads the order of growth over the
largest tenfold, so a fixed cost passes and a quadratic view fails (no timings)."""

from __future__ import annotations

import pytest
from bench import view
from bench._common import stat

SIZES = [1_000, 3_000, 10_000, 30_000, 100_000]


def _result(ms) -> dict:
    rows = [
        {"view": name, "lines": n, "before": stat([ms(n) * 100]), "after": stat([ms(n)])}
        for name in view.VIEWS
        for n in SIZES
    ]
    return {"config": {"sizes": SIZES}, "tables": {"views": rows}}


@pytest.mark.parametrize(
    ("ms", "order", "met"),
    [
        (lambda n: 5 + 0.7 * n / 1000, "0.80", True),  # a fixed 5 ms, then linear
        (lambda n: 0.7 * n / 1000, "1.00", True),
        (lambda n: 1e-5 * n * n / 1000, "2.00", False),
    ],
)
def test_linearity_is_the_order_of_growth_over_the_largest_tenfold(ms, order, met) -> None:
    target = view.targets(_result(ms))[1]
    assert target["target"] == "view time grows linearly with the file"
    assert target["measured"].startswith(f"order of growth from 10,000 to 100,000 lines {order} ")
    assert target["met"] is met
