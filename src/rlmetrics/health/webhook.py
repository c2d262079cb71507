"""Findings posted to a webhook (Slack, Discord, a generic JSON endpoint), retried without blocking.

* :func:`finding_payload`: the JSON body of one finding. ``text`` (Slack's incoming webhooks)
  and ``content`` (Discord's) carry one readable line; ``rlmetrics`` carries the finding itself
  (run, source, kind, severity, step, metric, evidence, advice) for a generic endpoint. Both
  services ignore the fields they do not know.
* :func:`post_json`: one POST with a short timeout, its outcome as a :class:`Attempt`.
* :class:`Outbox`: the deliveries still due. :meth:`Outbox.deliver_due` makes the attempts that
  are due now, within a time budget, and schedules a failed one again after an exponential
  backoff (capped); a delivery that failed ``tries`` times, or that the endpoint refused (a 4xx
  other than 408 and 429), is given up, with one :class:`~rlmetrics.errors.HealthWarning` per
  endpoint. Nothing waits in the background: the caller's loop calls it between refreshes, so a
  dead or slow endpoint costs at most the timeout per attempt, never the watch.

Only the standard library is used (``urllib``, ``json``).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from rlmetrics.errors import HealthWarning
from rlmetrics.health.findings import Finding

__all__ = ["Attempt", "Outbox", "finding_payload", "finding_text", "post_json"]

_MAX_TEXT = 1900  # Discord refuses a content over 2,000 characters
_RETRY_STATUS = frozenset({408, 429})  # a 4xx worth trying again; every 5xx is too


def finding_text(finding: Finding, *, run: str) -> str:
    """One readable line: run, kind, severity, step, evidence and advice.

    Examples
    --------
    >>> f = Finding("nonfinite", "error", 7, ("actor/pg_loss",), {"value": "nan"}, "Lower the lr.")
    >>> finding_text(f, run="exp1")
    'rlmetrics: exp1: nonfinite (error) from step 7 in actor/pg_loss: value=nan. Lower the lr.'
    """
    where = f" in {', '.join(finding.metric)}" if finding.metric else ""
    evidence = finding.evidence_text()
    text = f"rlmetrics: {run}: {finding.kind} ({finding.severity}) from step {finding.step}{where}"
    text += f": {evidence}." if evidence else "."
    if finding.advice:
        text += f" {finding.advice}"
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 3] + "..."


def finding_payload(finding: Finding, *, run: str, source: str | None = None) -> dict[str, Any]:
    """The JSON body posted for ``finding`` of ``run`` (see the module docstring).

    Examples
    --------
    >>> f = Finding("grad_spike", "warning", 3, ("actor/grad_norm",), {"ratio": 12.0})
    >>> body = finding_payload(f, run="exp1", source="logs/exp1/metrics.jsonl")
    >>> body["text"] == body["content"], body["rlmetrics"]["kind"], body["rlmetrics"]["step"]
    (True, 'grad_spike', 3)
    """
    text = finding_text(finding, run=run)
    return {"text": text, "content": text, "rlmetrics": {"run": run, "source": source, **finding.to_dict()}}


class Attempt(NamedTuple):
    """The outcome of one POST: delivered, worth trying again, and what happened."""

    ok: bool
    retry: bool
    detail: str


def post_json(url: str, payload: Any, *, timeout: float = 2.0) -> Attempt:
    """POST ``payload`` as JSON to ``url``, waiting at most ``timeout`` seconds for the answer.

    A 2xx is delivered; a 5xx, a 408 or 429, a refused connection or a timeout is worth trying
    again; another 4xx is not (the endpoint refuses the body or the URL is wrong). Never raises
    for a network failure.
    """
    from rlmetrics._version import __version__

    if not url.startswith(("http://", "https://")):  # file:// and the like: never worth a retry
        return Attempt(False, False, f"not an http:// or https:// URL: {_shown(url)}")
    body = json.dumps(payload, allow_nan=False, default=str).encode("utf-8")
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        # Discord's front refuses urllib's default user agent
        headers={"Content-Type": "application/json", "User-Agent": f"rlmetrics/{__version__}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status = int(response.status)
    except urllib.error.HTTPError as err:
        return Attempt(False, err.code >= 500 or err.code in _RETRY_STATUS, f"HTTP {err.code} {err.reason}")
    except (urllib.error.URLError, OSError) as err:  # refused, unreachable, timed out
        reason = getattr(err, "reason", err)
        return Attempt(False, True, f"{type(err).__name__}: {reason}")
    except ValueError as err:  # not a URL urllib can open: no use trying again
        return Attempt(False, False, f"{type(err).__name__}: {err}")
    return Attempt(200 <= status < 300, status >= 500, f"HTTP {status}")


@dataclass
class _Delivery:
    url: str
    payload: Any
    tries: int = 0
    due: float = 0.0


@dataclass
class Outbox:
    """Deliveries to webhooks, each tried up to ``tries`` times with capped exponential backoff.

    Parameters
    ----------
    tries : int
        Attempts per delivery before it is given up.
    timeout : float
        Seconds one attempt waits for the endpoint.
    backoff, max_backoff : float
        The wait before the second attempt, doubled for every later one, at most ``max_backoff``.
    post : callable
        ``post(url, payload, timeout=...) -> Attempt`` (:func:`post_json`; a test passes its own).
    clock : callable
        Seconds, monotonic (:func:`time.monotonic`).

    Examples
    --------
    >>> answers = iter([Attempt(False, True, "HTTP 500"), Attempt(True, False, "HTTP 200")])
    >>> box = Outbox(backoff=0.0, post=lambda url, payload, timeout: next(answers))
    >>> box.put("http://127.0.0.1:9/hook", {"text": "hi"})
    >>> box.deliver_due(), box.deliver_due(), box.sent, len(box)
    (0, 1, 1, 0)
    """

    tries: int = 4
    timeout: float = 2.0
    backoff: float = 0.5
    max_backoff: float = 30.0
    post: Callable[..., Attempt] = post_json
    clock: Callable[[], float] = time.monotonic
    sent: int = 0
    failed: int = 0
    _pending: list[_Delivery] = field(default_factory=list)
    _warned: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if isinstance(self.tries, bool) or not isinstance(self.tries, int) or self.tries < 1:
            raise ValueError(f"tries must be an int >= 1; got {self.tries!r}")
        for name in ("timeout", "backoff", "max_backoff"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
                raise ValueError(f"{name} must be a number >= 0; got {value!r}")

    def __len__(self) -> int:
        """Deliveries not yet made nor given up."""
        return len(self._pending)

    def put(self, url: str, payload: Any) -> None:
        """Queue ``payload`` for ``url``, due now."""
        self._pending.append(_Delivery(url, payload, due=self.clock()))

    def next_due(self) -> float | None:
        """When the next attempt is due (the :attr:`clock`'s time), None when nothing is queued."""
        return min((d.due for d in self._pending), default=None)

    def deliver_due(self, *, budget: float | None = None) -> int:
        """Make the attempts due now, oldest first, until ``budget`` seconds are spent.

        Returns
        -------
        int
            How many deliveries succeeded in this call.
        """
        start = self.clock()
        delivered = 0
        for delivery in sorted(self._pending, key=lambda d: d.due):
            now = self.clock()
            if delivery.due > now or (budget is not None and now - start >= budget):
                break
            attempt = self.post(delivery.url, delivery.payload, timeout=self.timeout)
            delivery.tries += 1
            if attempt.ok:
                self._pending.remove(delivery)
                self.sent += 1
                delivered += 1
            elif attempt.retry and delivery.tries < self.tries:
                wait = min(self.max_backoff, self.backoff * 2.0 ** (delivery.tries - 1))
                delivery.due = self.clock() + wait
            else:
                self._pending.remove(delivery)
                self._give_up(delivery, attempt)
        return delivered

    def flush(self, *, deadline: float) -> None:
        """Deliver what is queued, waiting out the backoffs, until the :attr:`clock` reads ``deadline``."""
        while self._pending and self.clock() < deadline:
            due = self.next_due()
            if due is not None and due > self.clock():
                time.sleep(max(0.0, min(due, deadline) - self.clock()))
                continue
            self.deliver_due(budget=max(0.0, deadline - self.clock()))

    def _give_up(self, delivery: _Delivery, attempt: Attempt) -> None:
        self.failed += 1
        if delivery.url in self._warned:
            return  # one warning per endpoint: a dead one would repeat it for every finding
        self._warned.add(delivery.url)
        warnings.warn(
            f"webhook {_shown(delivery.url)}: gave up a delivery after {delivery.tries} attempt(s) "
            f"({attempt.detail}); later failures of this endpoint are counted, not warned",
            HealthWarning,
            stacklevel=3,
        )


def _shown(url: str) -> str:
    """The URL without its path: a Slack or Discord webhook's path is its secret."""
    scheme, sep, rest = url.partition("://")
    host = rest.split("/", 1)[0].rsplit("@", 1)[-1]
    return f"{scheme}{sep}{host}/..." if sep else "<webhook>"
