// JSX-free templates: htm bound to Preact's h (no build step of its own beyond the bundle).
import { h } from 'preact';
import htm from 'htm';

export const html = htm.bind(h);
