"""For development, demos and tests: the site simulator, test helpers, the demo. Outside this
package only the CLI imports it."""
