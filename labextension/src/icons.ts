/** pallaslab's icon: a grid of tiles, one lit (a program's block). */

import { LabIcon } from '@jupyterlab/ui-components';

const LOGO = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 16 16">
  <g class="jp-icon3" fill="#616161">
    <rect x="1" y="1" width="4" height="4" rx="0.5"/>
    <rect x="6" y="1" width="4" height="4" rx="0.5"/>
    <rect x="11" y="1" width="4" height="4" rx="0.5"/>
    <rect x="1" y="6" width="4" height="4" rx="0.5"/>
    <rect x="11" y="6" width="4" height="4" rx="0.5"/>
    <rect x="1" y="11" width="4" height="4" rx="0.5"/>
    <rect x="6" y="11" width="4" height="4" rx="0.5"/>
    <rect x="11" y="11" width="4" height="4" rx="0.5"/>
  </g>
  <rect class="jp-icon-brand0" fill="#1976d2" x="6" y="6" width="4" height="4" rx="0.5"/>
</svg>`;

export const pallaslabIcon = new LabIcon({
  name: 'pallaslab:logo',
  svgstr: LOGO
});
