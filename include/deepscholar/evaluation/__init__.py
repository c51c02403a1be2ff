"""Judging reports on the seven metrics of METRICS.md and rolling the scores up into the leaderboard."""
