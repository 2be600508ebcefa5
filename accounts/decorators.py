"""Who may see the staff UI: active staff users, and nobody else.

Anonymous and non-staff users both go to the UI's own login page (not the
admin's), with `next` set so that a staff login lands where they wanted to go.
"""

from django.contrib.auth.decorators import user_passes_test

LOGIN_URL = "ui:login"


def is_staff(user) -> bool:
    return user.is_active and user.is_staff


staff_required = user_passes_test(is_staff, login_url=LOGIN_URL)
