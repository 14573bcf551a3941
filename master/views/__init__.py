"""``bats.master.views``: what people see of a run, read from the core's view or the journal, never changing either: the
live figures (:mod:`.live`), ``status`` (:mod:`.status`), the dashboard (:mod:`.dashboard`), the
report (:mod:`.report`, :mod:`.html_report`), the options table (:mod:`.options_table`) and plots
(:mod:`.plots`)."""
