"""Regenerate examples/queries.jsonl: memories shaped like Hindsight's, in plain English.

Each line is one recall: the query and the candidate memories the reranker would score,
rendered the way Hindsight renders them ("[Date: ...] context: text" where known).
Run: python examples/make_queries.py > examples/queries.jsonl
"""

from __future__ import annotations

import datetime as dt
import json
import random

MEMORIES: list[tuple[str | None, str | None, str]] = [
    ("2024-03-14", "conversation", "Maya said she is allergic to peanuts and carries an epinephrine pen."),
    ("2024-03-14", "conversation", "Maya prefers oat milk in her coffee and avoids dairy when she can."),
    ("2024-04-02", "calendar", "Dentist appointment for Maya at 9:30 on Tuesday with Dr. Okafor."),
    (None, None, "The user's daughter, Lena, started violin lessons in September."),
    ("2024-05-20", "travel", "Booked a flight from Lisbon to Copenhagen departing at 07:15, seat 14C."),
    ("2024-05-21", "travel", "The hotel in Copenhagen is near Nyhavn; check-in is after 3 pm and breakfast is included."),
    (None, "work", "The quarterly report is due on the last Friday of the month and goes to Priya first."),
    ("2024-06-11", "work", "Priya asked for the churn analysis to be split by region and by plan tier."),
    ("2024-06-12", "work", "The staging database was migrated to Postgres 16; the old instance will be deleted in July."),
    (None, "preferences", "The user likes short answers in the morning and detailed explanations in the evening."),
    ("2024-07-03", "health", "Started physiotherapy for a sore left knee, twice a week for six weeks."),
    ("2024-07-19", "health", "The physiotherapist recommended cycling instead of running until the knee recovers."),
    (None, None, "Lena's violin teacher is Mr. Haddad, and lessons are on Thursday afternoons."),
    ("2024-08-01", "finance", "The car insurance renewal is due on the 28th; the current premium is paid annually."),
    ("2024-08-09", "finance", "Switched the electricity contract to a fixed tariff for two years."),
    ("2024-08-15", "conversation", "Tomas recommended the novel 'The Remains of the Day' and said the ending moved him."),
    (None, "home", "The spare key is with the neighbour at number 12, Mrs. Lindqvist."),
    ("2024-09-05", "home", "The boiler was serviced; the engineer said the pressure valve should be replaced next year."),
    ("2024-09-18", "work", "The team agreed to move the weekly planning meeting from Monday to Wednesday at 10."),
    ("2024-10-01", "work", "Deployment freeze starts on December 15 and lasts until January 6."),
    (None, "preferences", "The user does not want notifications after 9 pm except for calendar alarms."),
    ("2024-10-22", "conversation", "Maya mentioned she is training for a half marathon in the spring."),
    ("2024-11-03", "travel", "Renewed the passport; the new one expires in November 2034."),
    ("2024-11-10", "health", "Annual blood test results were normal; vitamin D was slightly low."),
    (None, None, "The user's favourite cuisine is Ethiopian, especially injera with lentil stew."),
    ("2024-12-02", "work", "Priya approved the budget for two more engineers starting in the first quarter."),
    ("2024-12-20", "home", "Ordered a new washing machine; delivery is scheduled for the morning of January 4."),
    ("2025-01-08", "finance", "Set up a monthly transfer of 300 euros into the savings account on the 1st."),
    ("2025-01-15", "conversation", "Tomas is moving to Rotterdam in March for a job at a shipping company."),
    (None, "work", "The on-call rotation changes every Monday at noon; the handover note lives in the team wiki."),
    ("2025-02-11", "health", "The knee has improved; the physiotherapist cleared the user for light jogging."),
    ("2025-02-27", "travel", "Planning a summer trip to the Scottish Highlands, probably the second half of July."),
    ("2025-03-06", "conversation", "Maya's half marathon is on April 13 in Utrecht; she wants company at the finish."),
    (None, "preferences", "When summarising documents, the user wants the decisions listed before the discussion."),
    ("2025-03-19", "work", "The churn analysis showed that most cancellations happen in the second month of a plan."),
    ("2025-04-01", "home", "The pressure valve on the boiler was replaced; the warranty on the part is two years."),
    ("2025-04-14", "conversation", "Maya finished the half marathon in one hour and fifty-two minutes."),
    (None, None, "Lena wants to join the school orchestra next year and is practising scales every day."),
    ("2025-05-09", "finance", "The tax return was filed; a refund of about 640 euros is expected in June."),
    ("2025-05-23", "work", "The team decided to deprecate the old billing API at the end of the year."),
]

LONG_MEMORIES: list[tuple[str | None, str | None, str]] = [
    ("2024-06-28", "meeting notes",
     "Planning meeting with Priya and the data team. We reviewed the churn analysis and agreed that the "
     "regional split is more useful than the plan-tier split for the board. Action items: Priya will draft the "
     "summary slide, Jonas will re-run the numbers excluding trial accounts, and the user will write the "
     "methodology appendix. The next review is in two weeks, and the report must be ready before the board "
     "meeting at the end of the quarter. Open question: whether annual plans should be counted as twelve "
     "monthly renewals or as one renewal."),
    ("2024-09-30", "journal",
     "Long walk along the river after work. Thought about whether to accept the offer to lead the platform team. "
     "The upside is more influence over the roadmap and a chance to fix the deployment process that everyone "
     "complains about. The downside is less time for hands-on work and more meetings. Decided to ask Priya "
     "what the expectations would be for the first six months before answering, and to talk it over with Maya "
     "at the weekend."),
    ("2025-02-05", "email",
     "The landlord wrote that the building's heating system will be inspected on February 19 between 8 am and "
     "noon, and that someone needs to be home to let the technician in. He also said the rent will rise by two "
     "percent from April, in line with the index clause in the contract, and asked for the meter readings for "
     "water and gas to be sent before the end of the month."),
    ("2025-04-20", "trip notes",
     "Rough plan for the Highlands: fly into Inverness, rent a small car, two nights near Loch Ness, then drive "
     "west to Skye for three nights, with one day reserved for bad weather. Book the ferry back from Armadale "
     "to Mallaig in advance because it fills up in July. Maya wants to hike the Quiraing; Lena wants to see "
     "puffins, which might mean a boat trip from Elgol or a detour to the Treshnish Isles."),
    (None, "how-to",
     "To restart the staging environment: first drain the job queue from the admin page, then scale the worker "
     "deployment to zero, wait until the pods have terminated, run the database migration job, and finally "
     "scale the workers back to their previous count. If the migration job fails, check that the connection "
     "string points at the new Postgres 16 instance rather than the old one that is scheduled for deletion."),
]

QUERIES: list[tuple[str, str]] = [
    ("What is Maya allergic to?", "low"),
    ("When is the car insurance due?", "low"),
    ("What did the physiotherapist say about running?", "mid"),
    ("Who has the spare key to the house?", "low"),
    ("What was decided about the churn analysis for the board?", "mid"),
    ("When does the deployment freeze start and end?", "mid"),
    ("How did Maya do in her half marathon?", "high"),
    ("What are the plans for the summer trip to Scotland?", "high"),
    ("What happened with the boiler?", "mid"),
    ("Which book did Tomas recommend?", "low"),
    ("How do I restart the staging environment?", "high"),
    ("What are Lena's music activities?", "mid"),
]

CANDIDATES = {"low": 10, "mid": 16, "high": 22}


def render(date: str | None, context: str | None, text: str) -> str:
    """Hindsight's reranker input: "[Date: June 05, 2022 (2022-06-05)] context: text"."""
    out = f"{context}: {text}" if context else text
    if date:
        d = dt.date.fromisoformat(date)
        out = f"[Date: {d:%B %d, %Y} ({d:%Y-%m-%d})] {out}"
    return out


def main() -> None:
    rng = random.Random(7)
    pool = [render(*m) for m in MEMORIES] + [render(*m) for m in LONG_MEMORIES]
    for i, (query, budget) in enumerate(QUERIES):
        docs = rng.sample(pool, k=min(CANDIDATES[budget], len(pool)))
        print(json.dumps({"id": f"q{i + 1:02d}", "query": query, "budget": budget, "documents": docs},
                         ensure_ascii=False))


if __name__ == "__main__":
    main()
