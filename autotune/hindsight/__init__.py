"""Everything autotune knows about Hindsight itself: its HTTP API, its traces, its versions, its keys, and the
order it puts recall results in after the reranker. One room, so a new Hindsight release changes one place."""
