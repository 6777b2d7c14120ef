"""Counter-cache columns as ordinary fields: CounterField (bigint, default 0, not editable in forms) and the model
mixin that never writes them back: a model instance loaded before the counter changed would otherwise save its stale
value over the database's (Django's save() writes every field)."""

from django.db import models


class CounterField(models.BigIntegerField):
    """A column kept by a counter (Counter(..., target=<this model's table>)): read it, never write it."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("default", 0)
        kwargs.setdefault("editable", False)
        super().__init__(*args, **kwargs)


class CounterFieldsMixin:
    """save() of an existing row writes every field but its CounterFields (unless update_fields names them)."""

    def save(self, *args, **kwargs):
        if not self._state.adding and kwargs.get("update_fields") is None:
            kwargs["update_fields"] = [f.attname for f in self._meta.concrete_fields
                                       if not f.primary_key and not isinstance(f, CounterField)]
        super().save(*args, **kwargs)
