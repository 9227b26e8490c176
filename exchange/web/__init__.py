"""``exchange serve``: the service's HTTP side (contract 9).

``server`` builds the aiohttp application and runs it; ``onec`` is 1C's standard exchange
(9a), ``intents`` the JSON intake (9b); ``files`` keeps each exchange's uploads in a folder of
its own and unpacks archives safely; ``keys`` signs cookies. Every way in ends in
``intake.stage`` (or a clear refusal).
"""
