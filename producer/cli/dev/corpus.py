"""The sample corpus of ``vectorsync dev``: Python's help topics and a small table of CRM notes.

Both are loaded into SQL tables that the dev collections read through the
``sql`` source, as an application's own tables would be:

- ``python_topics``: one row per topic of ``pydoc_data.topics`` (the text
  behind ``help("try")``), id = the topic name;
- ``crm_notes``: 30 notes of calls, emails and meetings with an owner and an
  RFC 3339 ``created_at``.

``samples`` loads them, keeping what someone changed.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

__all__ = ["CRM_NOTES", "CRM_TABLE", "TOPICS_TABLE", "crm_rows", "length_bucket", "topic_rows"]

TOPICS_TABLE = "python_topics"
CRM_TABLE = "crm_notes"

#: (kind, owner, created_at, title, body)
CRM_NOTES: tuple[tuple[str, str, str, str, str], ...] = (
    (
        "call",
        "Dana",
        "2026-08-04T09:30:00Z",
        "Acme Logistics kickoff call",
        "Acme's operations lead is worried that onboarding will take months. They have 40 depots and want the "
        "first ten live before peak season. Agreed to send a phased rollout plan by Friday.",
    ),
    (
        "email",
        "Priya",
        "2026-08-06T14:10:00Z",
        "Northwind: quote for 200 seats",
        "Sent the quote for 200 seats on the annual plan. Their buyer asked whether a multi-year commitment "
        "changes the price; told them I would check what discount we can offer for three years.",
    ),
    (
        "meeting",
        "Marco",
        "2026-08-11T10:00:00Z",
        "Globex quarterly business review",
        "Reviewed usage with Globex: adoption is strong in finance, weak in sales. They want training for the "
        "sales team and a dashboard of weekly active users per department.",
    ),
    (
        "call",
        "Lena",
        "2026-08-13T16:45:00Z",
        "Initech support escalation",
        "Initech called about slow exports from the reporting module. Their admin is frustrated; engineering "
        "has a fix scheduled. I promised a status update every two days until it ships.",
    ),
    (
        "call",
        "Dana",
        "2026-08-19T11:00:00Z",
        "Umbrella Health discovery call",
        "Umbrella Health needs SSO and an audit log before security review. Their main concern is how long "
        "onboarding takes for clinical staff who have little time for training.",
    ),
    (
        "email",
        "Marco",
        "2026-08-21T08:20:00Z",
        "Globex training dates",
        "Proposed three remote training sessions for the Globex sales team in September. Attached the agenda "
        "and asked them to pick dates that avoid their quarter-end.",
    ),
    (
        "meeting",
        "Priya",
        "2026-08-27T15:30:00Z",
        "Northwind procurement meeting",
        "Met procurement at Northwind. They push for a 15% discount on the annual plan and net-60 payment "
        "terms. Legal review of the MSA is on their side; expected in two weeks.",
    ),
    (
        "call",
        "Lena",
        "2026-09-02T09:15:00Z",
        "Hooli renewal check-in",
        "Hooli renews in November. The champion is happy but the new CFO is reviewing every vendor. Need a "
        "value summary with hours saved per month before the budget meeting.",
    ),
    (
        "email",
        "Dana",
        "2026-09-04T13:05:00Z",
        "Acme rollout plan sent",
        "Sent Acme the phased rollout plan: three waves of depots, a named onboarding manager, and weekly "
        "check-ins. Asked for a data export of their depot list to start the import.",
    ),
    (
        "call",
        "Marco",
        "2026-09-09T17:20:00Z",
        "Soylent Corp churn risk",
        "Soylent's admin says the team stopped using the mobile app after the last update. Usage dropped 40%. "
        "They are evaluating a competitor; booked a session with product to walk through their issues.",
    ),
    (
        "meeting",
        "Lena",
        "2026-09-15T10:30:00Z",
        "Initech fix demo",
        "Demoed the export fix to Initech's admin and two analysts. Exports now finish in under a minute. "
        "They asked for scheduled exports to their data warehouse as a next step.",
    ),
    (
        "call",
        "Priya",
        "2026-09-17T12:00:00Z",
        "Stark Industries first call",
        "Inbound lead from Stark Industries: 1,000 users across engineering. They ask about on-premise "
        "deployment and data residency in the EU. Sent the security whitepaper.",
    ),
    (
        "email",
        "Lena",
        "2026-09-22T09:40:00Z",
        "Hooli value summary",
        "Sent Hooli the value summary: 320 hours saved per month across support and finance, and a 12% "
        "faster month-end close. The champion will present it to the CFO next week.",
    ),
    (
        "call",
        "Dana",
        "2026-09-24T15:00:00Z",
        "Umbrella Health onboarding worries",
        "Follow-up call with Umbrella Health. The customer is still worried about onboarding time for nurses "
        "on night shifts. Offered short video lessons and an in-app guide instead of live sessions.",
    ),
    (
        "meeting",
        "Marco",
        "2026-09-29T14:00:00Z",
        "Soylent product session",
        "Product walked Soylent through the mobile roadmap; the offline mode they need ships in October. "
        "They agreed to pause the competitor evaluation until then.",
    ),
    (
        "email",
        "Priya",
        "2026-10-01T10:10:00Z",
        "Northwind revised pricing",
        "Sent Northwind a revised pricing proposal: 10% discount for a three-year term, net-45 payment. "
        "Their buyer says it is close; procurement needs sign-off from the COO.",
    ),
    (
        "call",
        "Lena",
        "2026-10-02T16:30:00Z",
        "Hooli CFO questions",
        "The Hooli CFO asked why our price went up 8% at renewal and whether a volume discount applies "
        "above 500 seats. Promised a written answer with the pricing tiers.",
    ),
    (
        "meeting",
        "Dana",
        "2026-10-06T11:00:00Z",
        "Acme wave one go-live",
        "First wave of Acme depots went live. Onboarding took two weeks instead of the feared months. "
        "Their ops lead wants the same playbook for the remaining thirty depots.",
    ),
    (
        "call",
        "Marco",
        "2026-10-08T09:45:00Z",
        "Globex expansion interest",
        "Globex wants to add the marketing team, about 60 seats. They asked if the discount from their "
        "original contract carries over to the new seats.",
    ),
    (
        "email",
        "Priya",
        "2026-10-09T13:25:00Z",
        "Stark security questionnaire",
        "Returned Stark's 180-question security questionnaire. Open points: customer-managed encryption keys "
        "and a penetration test report from the last twelve months.",
    ),
    (
        "call",
        "Dana",
        "2026-10-13T10:20:00Z",
        "Umbrella Health pilot results",
        "Pilot with two Umbrella wards finished: 85% of staff completed onboarding within a week using the "
        "video lessons. The customer is no longer worried about rollout time.",
    ),
    (
        "meeting",
        "Lena",
        "2026-10-15T15:00:00Z",
        "Hooli pricing negotiation",
        "Negotiated with Hooli finance: they accept the new price if we add a 5% loyalty discount and cap "
        "next year's increase at 3%. Needs approval from our VP of sales.",
    ),
    (
        "email",
        "Marco",
        "2026-10-20T08:50:00Z",
        "Globex expansion quote",
        "Quoted 60 marketing seats for Globex, co-termed with their existing contract, at their current "
        "per-seat price. Pricing holds until the end of November.",
    ),
    (
        "call",
        "Priya",
        "2026-10-22T17:00:00Z",
        "Northwind verbal yes",
        "Northwind's COO gave a verbal yes on the three-year deal with the 10% discount. Contract to be "
        "signed after their legal team finishes the data processing addendum.",
    ),
    (
        "meeting",
        "Dana",
        "2026-10-27T09:00:00Z",
        "Acme executive sponsor meeting",
        "Met Acme's VP of operations. She wants a single dashboard of depot performance and asked whether "
        "our API can feed their warehouse. Next: technical call with their data team.",
    ),
    (
        "call",
        "Marco",
        "2026-11-03T14:30:00Z",
        "Soylent offline mode feedback",
        "Soylent tried the offline mode beta: field reps can log visits without signal. Usage is recovering. "
        "They asked about pricing for 25 more field seats.",
    ),
    (
        "email",
        "Lena",
        "2026-11-05T10:40:00Z",
        "Hooli renewal signed",
        "Hooli signed the renewal: 520 seats, 5% loyalty discount, 3% cap on next year's price increase. "
        "Handed over to customer success for the annual plan.",
    ),
    (
        "call",
        "Priya",
        "2026-11-10T11:15:00Z",
        "Stark pricing call",
        "Stark's procurement asked for enterprise pricing for 1,000 seats and a discount for paying "
        "annually upfront. They also want a dedicated onboarding team for the first three months.",
    ),
    (
        "meeting",
        "Dana",
        "2026-11-12T16:00:00Z",
        "Umbrella Health contract review",
        "Contract review with Umbrella Health legal. Remaining items: the audit log retention period and a "
        "clause on support response times for critical incidents.",
    ),
    (
        "email",
        "Marco",
        "2026-11-17T09:05:00Z",
        "Soylent field seats quote",
        "Sent Soylent a quote for 25 field seats at list price with a 7% discount if they sign before the "
        "end of the month. Their manager will decide after the regional sales meeting.",
    ),
)


def length_bucket(text: str) -> str:
    """``short`` (under 1,000 characters), ``medium`` (under 5,000) or ``long``."""
    size = len(text)
    return "short" if size < 1000 else "medium" if size < 5000 else "long"


def topic_rows() -> list[dict[str, Any]]:
    """One row per Python help topic: ``topic``, ``body``, ``kind``, ``length``."""
    from pydoc_data.topics import topics

    return [
        {"topic": name, "body": text.strip(), "kind": "python-topic", "length": length_bucket(text)}
        for name, text in sorted(topics.items())
        if text.strip()
    ]


def crm_rows() -> list[dict[str, Any]]:
    """The CRM notes as rows: ``id`` (1..), ``title``, ``body``, ``kind``, ``owner``, ``created_at`` (UTC)."""
    return [
        {
            "id": number,
            "title": title,
            "body": body,
            "kind": kind,
            "owner": owner,
            "created_at": dt.datetime.fromisoformat(created_at),
        }
        for number, (kind, owner, created_at, title, body) in enumerate(CRM_NOTES, start=1)
    ]
