"""makemigrations for Meta.counters: an autodetector mixin (apps.py installs it) that compares each model's counters
between the migration state and the models, the way Django compares Meta.indexes and Meta.constraints:

  - a model created with counters: CreateModel without them, then a CreateCounter each, once its fields exist;
  - a model deleted: its counters dropped first (DropCounter, reversible: backwards declares them again);
  - a counter removed from a kept model: DropCounter before fields are removed (its definition may read them);
  - a counter added: CreateCounter after fields are added; changed (definition, target, mode, deferral): AlterCounter;
  - an app's first counters: CreateExtension() at the start of the migration (IF NOT EXISTS; reversed, it stays).
"""


def _by_name(state, key):
    model = state.models.get(key)
    return {c.name: c for c in (model.options.get("counters") or [])} if model is not None else {}


class CountersAutodetectorMixin:
    def generate_created_models(self):
        # (CreateModel would carry the counters in its options: they go as operations of their own)
        stashed = {}
        for key in set(self.new_model_keys) - set(self.old_model_keys):
            options = self.to_state.models[key].options
            if "counters" in options:
                stashed[key] = options.pop("counters")
        try:
            super().generate_created_models()
        finally:
            for key, counters in stashed.items():
                self.to_state.models[key].options["counters"] = counters

    def generate_deleted_models(self):
        from .operations import DropCounter

        for key in sorted(set(self.old_model_keys) - set(self.new_model_keys)):
            for name in sorted(_by_name(self.from_state, key)):
                self.add_operation(key[0], DropCounter(model_name=self.from_state.models[key].name, name=name))
        super().generate_deleted_models()

    def generate_removed_constraints(self):
        from .operations import DropCounter

        super().generate_removed_constraints()
        for key in sorted(set(self.old_model_keys) & set(self.new_model_keys)):
            old, new = _by_name(self.from_state, key), _by_name(self.to_state, key)
            for name in sorted(set(old) - set(new)):
                self.add_operation(key[0], DropCounter(model_name=self.to_state.models[key].name, name=name))

    def generate_added_constraints(self):
        from .operations import AlterCounter, CreateCounter, CreateExtension

        super().generate_added_constraints()
        # (an app's first counters: the extension first, if the database has it not)
        had = {key[0] for key in self.from_state.models if _by_name(self.from_state, key)}
        extended = set()
        for key in sorted(self.new_model_keys):
            if key[0] not in had and key[0] not in extended and _by_name(self.to_state, key):
                self.add_operation(key[0], CreateExtension(), beginning=True)
                extended.add(key[0])
        for key in sorted(self.new_model_keys):
            old, new = _by_name(self.from_state, key), _by_name(self.to_state, key)
            model_name = self.to_state.models[key].name
            for name in sorted(new):
                if name not in old:
                    self.add_operation(key[0], CreateCounter(model_name=model_name, counter=new[name]),
                                       dependencies=[(key[0], key[1], None, True)])
                elif old[name] != new[name]:
                    self.add_operation(key[0], AlterCounter(model_name=model_name, counter=new[name]))
