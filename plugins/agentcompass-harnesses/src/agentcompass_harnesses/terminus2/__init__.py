"""``terminus-2``: Harbor's Terminus 2 agent as a harness (:mod:`.harness`), ported from Harbor 0.25.0 (Apache-2.0)
without depending on it: its prompt templates (``templates/``) and response parsers (:mod:`.json_parser`,
:mod:`.xml_parser`) copied verbatim, its tmux session (:mod:`.tmux`), conversation (:mod:`.chat`) and context
summarisation (:mod:`.summarize`) ported onto the run's model client and the environment's ``exec``."""
