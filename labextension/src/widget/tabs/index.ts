/**
 * Every tab's renderer, by tab id. The type makes it whole: a tab Python has
 * (`contracts.TabId`) without a renderer here, or a renderer for another pane's
 * model, does not compile.
 */

import type {
  IIrPane,
  IJaxprPane,
  IOverviewPane,
  IRunPane,
  ISourcePane,
  ITilesPane,
  TabId
} from '../../contracts';
import { ITabRenderer } from '../context';
import { IR } from './ir';
import { JAXPR } from './jaxpr';
import { OVERVIEW } from './overview';
import { RUN } from './run';
import { SOURCE } from './source';
import { TILES } from './tiles';

/** The model of each tab's pane. */
export interface IPaneOf {
  overview: IOverviewPane;
  source: ISourcePane;
  jaxpr: IJaxprPane;
  tiles: ITilesPane;
  ir: IIrPane;
  run: IRunPane;
}

export const TABS: { [K in TabId]: ITabRenderer<IPaneOf[K]> } = {
  overview: OVERVIEW,
  source: SOURCE,
  jaxpr: JAXPR,
  tiles: TILES,
  ir: IR,
  run: RUN
};
