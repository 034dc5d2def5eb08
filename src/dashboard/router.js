// Pages by the URL's hash (`#/calls/<id>`, `#/calls?status=ended`): no server route per page, and
// a reload or a shared link opens the same page.
import { useEffect, useState } from 'preact/hooks';

export function parseRoute(hash = location.hash) {
  const [pathPart, query = ''] = hash.replace(/^#/, '').split('?');
  const parts = pathPart.split('/').filter(Boolean).map(decodeURIComponent);
  return { parts, query: Object.fromEntries(new URLSearchParams(query)) };
}

export function href(path, query = {}) {
  const q = new URLSearchParams(Object.entries(query).filter(([, v]) => v !== undefined && v !== null && v !== ''));
  const s = q.toString();
  return `#${path}${s ? `?${s}` : ''}`;
}

export const navigate = (path, query) => {
  location.hash = href(path, query).slice(1);
};

export function useRoute() {
  const [route, setRoute] = useState(parseRoute());
  useEffect(() => {
    const on = () => setRoute(parseRoute());
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  return route;
}
