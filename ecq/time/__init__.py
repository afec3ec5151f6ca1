"""Time: the event-time keeper around an engine (:mod:`.timekeeper`: lateness, late and
far-ahead events), the reorder buffer (:mod:`.reorder`), each class's drop horizon
(:mod:`.horizon`) and window masks (:mod:`.windows`)."""
