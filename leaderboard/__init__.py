"""The leaderboard: MLflow runs to a DataFrame to a table; rebuilt from MLflow alone."""
