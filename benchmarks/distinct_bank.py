"""A bank of distinct memories for the pool benchmark: the example's 45, then facts of the same household
and office, each said once.

`tests.support.real_hindsight.memories` repeats the example's 45 memories (each about 67 times in 3000, glued to
another one or marked as noted again), so a query's answer arrives in dozens of near-copies whose order
only noise decides, and a result list keeps an arbitrary few of them. A bank a user builds says each
fact once, with many memories sharing a query's words (the same people, the same insurance, another
trip). This one is built from templates over those people and topics, seeded, with no two memories alike.
"""

from __future__ import annotations

import random
from typing import Any

import _common  # noqa: F401  (puts examples/ on sys.path)
import make_queries as mq

PEOPLE = ["Maya", "Lena", "Priya", "Tomas", "Omar", "Ines", "Kenji", "Sofia", "Ravi", "Anna", "Jonas", "Elif",
          "Marco", "Yuki", "Dara", "Felix", "Noor", "Hugo", "Zara", "Pavel"]
CITIES = ["Lisbon", "Copenhagen", "Edinburgh", "Porto", "Berlin", "Glasgow", "Inverness", "Oslo", "Seville",
          "Ghent", "Krakow", "Bergen", "Lyon", "Utrecht", "Galway", "Turin"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]

TEMPLATES: list[tuple[str, str, dict[str, list[str]]]] = [
    ("health", "{p} saw Dr. {doc} about {pain}; the advice was {advice} for {n} weeks.",
     {"doc": ["Okafor", "Lindqvist", "Moreau", "Adeyemi", "Brennan", "Sato"],
      "pain": ["a stiff neck", "a sore ankle", "back pain", "a sprained wrist", "knee pain", "shin splints",
               "a tight hamstring", "hay fever"],
      "advice": ["rest and ice", "swimming instead of running", "daily stretching", "physiotherapy twice a week",
                 "antihistamines in the morning", "no football", "a lighter training plan"]}),
    ("finance", "The {policy} insurance for the {asset} renews on the {ord}; {p} wants {n} quotes first.",
     {"policy": ["home", "car", "travel", "contents", "pet", "bicycle", "life"],
      "asset": ["flat", "old Volvo", "new hatchback", "cabin", "cat", "e-bike", "family", "garden shed"],
      "ord": ["3rd", "9th", "14th", "21st", "28th", "30th"]}),
    ("work", "{p} asked for the {report} to be split by {dim} before the {meeting}.",
     {"report": ["churn analysis", "revenue forecast", "hiring plan", "support backlog review",
                 "pricing study", "cost report", "retention dashboard", "incident summary"],
      "dim": ["region", "plan tier", "quarter", "team", "customer size", "channel", "product line"],
      "meeting": ["board meeting", "offsite", "quarterly review", "budget round", "all-hands",
                  "investor call"]}),
    ("travel", "{p} booked a {transport} from {city} to {city2} on {month} {n}, {detail}.",
     {"transport": ["flight", "night train", "ferry", "coach", "rental car"],
      "detail": ["seat by the window", "with a stopover", "returning a week later", "with two bags",
                 "refundable until the day before", "paid with points"]}),
    ("home", "The {appliance} in the {room} {problem}; {p} called a {trade} for {day}.",
     {"appliance": ["boiler", "dishwasher", "washing machine", "fridge", "radiator", "smoke alarm",
                    "extractor fan", "water heater"],
      "room": ["kitchen", "bathroom", "hallway", "basement", "spare room", "attic"],
      "problem": ["is leaking", "makes a rattling noise", "stopped working", "keeps tripping the fuse",
                  "needs a yearly service", "shows an error code"],
      "trade": ["plumber", "electrician", "engineer", "handyman", "technician"]}),
    ("conversation", "{p} recommended the {medium} '{title}' and said {opinion}.",
     {"medium": ["novel", "podcast", "documentary", "album", "board game", "film", "cookbook"],
      "title": ["Northern Lights", "The Long Road", "Salt and Stone", "Quiet Harbour", "Paper Moons",
                "The Glass Garden", "Winter Orchard", "Small Hours", "The Last Ferry", "Open Water"],
      "opinion": ["the ending moved them", "it was slow at first", "it is perfect for the train",
                  "the second half is better", "it made them laugh", "it is too long"]}),
    ("sport", "{p} ran a {race} in {city} in {n} minutes over target and {feeling}.",
     {"race": ["5k", "10k", "half marathon", "trail race", "park run", "relay"],
      "feeling": ["felt strong", "cramped near the end", "wants to try again", "blamed the heat",
                  "was happy with the pacing"]}),
    ("household", "{p} has the {key} for the {place}; {detail}.",
     {"key": ["spare key", "garage remote", "padlock code", "alarm code", "mailbox key", "bike lock key"],
      "place": ["house", "cabin", "office", "storage unit", "allotment", "car park"],
      "detail": ["ask before the weekend", "it is on the blue keyring", "it changes next month",
                 "a copy is in the drawer", "return it after the holidays"]}),
    ("work", "The {service} {window} runs from {month} {n} to {month2} {n2}, and {p} owns the rollback plan.",
     {"service": ["billing", "search", "payments", "mobile app", "data warehouse", "auth", "staging"],
      "window": ["deployment freeze", "migration window", "maintenance window", "code freeze",
                 "load test"]}),
    ("travel", "{p} suggested a {season} trip to {region} with {n} nights in {city}.",
     {"season": ["summer", "autumn", "spring", "winter", "long-weekend"],
      "region": ["Scotland", "the Highlands", "Norway", "Andalusia", "the Alps", "Ireland", "Brittany",
                 "the Lake District"]}),
]


def _fill(rng: random.Random, template: str, slots: dict[str, list[str]]) -> str:
    values = {k: rng.choice(v) for k, v in slots.items()}
    values.update(p=rng.choice(PEOPLE), city=rng.choice(CITIES), city2=rng.choice(CITIES), day=rng.choice(DAYS),
                  month=rng.choice(MONTHS), month2=rng.choice(MONTHS), n=rng.randint(2, 28), n2=rng.randint(2, 28))
    return template.format(**values)


def distinct_memories(n: int = 3000, seed: int = 11) -> list[dict[str, Any]]:
    """`n` memories, no two alike: the example's (so each example query has its answer), then template facts."""
    rng = random.Random(seed)
    facts = [(date or "2025-01-15", context, text) for date, context, text in mq.MEMORIES + mq.LONG_MEMORIES]
    seen = {text for _, _, text in facts}
    while len(facts) < n:
        context, template, slots = rng.choice(TEMPLATES)
        text = _fill(rng, template, slots)
        if text not in seen:
            seen.add(text)
            date = f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
            facts.append((date, context, text))
    return [{"content": text, "document_id": f"memory-{i}", "timestamp": f"{date}T09:00:00Z",
             **({"context": context} if context else {})} for i, (date, context, text) in enumerate(facts[:n])]
