"""The documents the fast tests' workloads are made of: short facts, dates, CJK with an emoji, a long repeat."""

from __future__ import annotations

DOCS = [
    "Paris is the capital and most populous city of France.",
    "The Eiffel Tower was completed in 1889.",
    "Berlin is the capital of Germany.",
    "[Date: June 05, 2022 (2022-06-05)] conversation: Maya said she is allergic to peanuts.",
    "Bananas are rich in potassium.",
    "The Seine flows through Paris before reaching the English Channel at Le Havre, passing many bridges.",
    "東京は日本の首都です。🍣",
    "France borders Spain, Italy, Switzerland, Germany, Luxembourg and Belgium.",
    "x " * 400,
]
