"""ForgeBench's command line (`forgebench`), above the harness that runs and records and the leaderboard that reads."""
