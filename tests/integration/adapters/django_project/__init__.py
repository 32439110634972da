"""A Django project as an app team has one: settings, manage.py, and an app whose models are indexed."""
