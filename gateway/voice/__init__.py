"""Voice: voice notes heard before their turn (:mod:`.hearing`), replies spoken (:mod:`.speaking`).

Audio goes through an OpenAI-compatible provider (:mod:`.audio_api`); ffmpeg converts and cuts
only where needed (:mod:`.ffmpeg`).
"""
