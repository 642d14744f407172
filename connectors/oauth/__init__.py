"""OAuth for connectors that reach protected upstreams (issue 17): the port to the gateway's token
store and authorization broker (:mod:`connectors.oauth.port`)."""
