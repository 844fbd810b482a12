"""What every long call needs: deadlines and prompt stops, one retry policy, one HTTP client, traces, alerts, cron schedules.
"""
