"""HTTP routes, one router per resource: owners' experiments, participants' queries, web pages."""
