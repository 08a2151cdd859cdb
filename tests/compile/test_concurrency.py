"""How many CUDA compiles run at once and how many threads each nvcc gets: within
the cores, and at most KERNELNIX_MAX_NVCC_JOBS compiles for memory-bound kernels."""

from __future__ import annotations

import pytest

from kernelnix.compile.variant import MAX_NVCC_JOBS, nvcc_concurrency
from kernelnix.core.diagnostics import UserError


@pytest.mark.parametrize(
    ("jobs", "archs", "limit", "expected"),
    [
        (2, 2, None, (None, 1)),  # Ninja's 2 jobs fill 2 cores: 1 thread each
        (8, 10, None, (None, 1)),
        (8, 10, "2", (2, 4)),  # 2 compiles at once, the 8 cores split between them
        (8, 3, "2", (2, 3)),  # never more threads than archs
        (8, 10, "1", (1, 8)),
        (2, 10, "4", (2, 1)),  # the limit is no more than the cores
    ],
)
def test_compiles_times_threads_stay_within_the_cores(
    monkeypatch: pytest.MonkeyPatch,
    jobs: int,
    archs: int,
    limit: str | None,
    expected: tuple[int | None, int],
) -> None:
    if limit is None:
        monkeypatch.delenv(MAX_NVCC_JOBS, raising=False)
    else:
        monkeypatch.setenv(MAX_NVCC_JOBS, limit)
    at_once, threads = nvcc_concurrency(jobs, archs)
    assert (at_once, threads) == expected
    assert (at_once or jobs) * threads <= jobs


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5"])
def test_a_bad_limit_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(MAX_NVCC_JOBS, value)
    with pytest.raises(UserError) as raised:
        nvcc_concurrency(4, 2)
    text = raised.value.render()
    assert MAX_NVCC_JOBS in text and repr(value) in text and "positive number" in text
